"""What goes onto the instance: the user data rendered from userdata/<version>/, its header of
`SPOT_*` variables and the 16 KiB it must fit in, the runtime's wheel built at synth, and what each
user data version supports (the table, and the refusals of what the chosen version cannot carry).

It may import `stacks.job`; the console's parameters reach it from the stack, by their names in the
settings table.
"""
