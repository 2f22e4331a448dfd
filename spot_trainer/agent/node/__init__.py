"""What a node does in its job whichever its mode: where the command starts from (`restore`), how it is
started (`command_start`), what the node sends to S3 (`uploads`), how its part ends (`endings`), how one
run of the command ended (`outcome`), the final outputs kept (`keep_outputs`), and the mode's protocol with
what every mode is built from (`mode`).

It may import the `instance`, `records`, `watches` and `program` wings, `spot_trainer.storage`, `spot_trainer.costs`
(the pauses an ending reads) and the shelf; never a mode (`one_node`, `several_nodes`), which build on it.
"""
