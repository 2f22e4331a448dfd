"""Shell commands that stand in for training and leave in CHECKPOINT_DIR what careless tools and full
disks do: for the tests and benchmarks/faults.py alike."""

# Fills every inode of CHECKPOINT_DIR with dot-files (never a checkpoint), saves step-10 into the last
# one, then frees one and saves step-11: at once, or with {wait} = UNTIL_STOPPED on the stop signal.
FULL_DISK = ('trap "stop=1" TERM; i=0; while [ $i -lt 10000 ] && touch "$CHECKPOINT_DIR/.fill-$i" 2>/dev/null; '
             'do i=$((i+1)); done; rm "$CHECKPOINT_DIR/.fill-0"; printf weights-10 > "$CHECKPOINT_DIR/.t"; '
             'mv "$CHECKPOINT_DIR/.t" "$CHECKPOINT_DIR/step-10"; echo saved 10; {wait}'
             'rm "$CHECKPOINT_DIR/.fill-1"; printf weights-11 > "$CHECKPOINT_DIR/.t"; '
             'mv "$CHECKPOINT_DIR/.t" "$CHECKPOINT_DIR/step-11"; echo saved 11; exit 0')
UNTIL_STOPPED = 'while [ -z "${stop:-}" ]; do sleep 0.1; done; '
# Three checkpoints, each with a name a tool writing raw bytes leaves, and a sub-folder that is not UTF-8.
ODD_NAMES = ('for s in 10 20 30; do d="$CHECKPOINT_DIR/.t"; mkdir -p "$d/sub$(printf "\\376")"; '
             'echo "weights $s" > "$d/model.pt"; echo "raw $s" > "$d/w$(printf "\\377").bin"; '
             'echo "notes $s" > "$d/sub$(printf "\\376")/100%$(printf "\\351").txt"; '
             'mv "$d" "$CHECKPOINT_DIR/step-$s"; done; exit 0')
# Three checkpoints holding only a file whose S3 key would be over 1024 bytes.
NOTHING_STORABLE = ('long=$(printf "%0250d" 0); for s in 10 20 30; do d="$CHECKPOINT_DIR/.t/$long/$long/$long/$long"; '
                    'mkdir -p "$d" && echo "w $s" > "$d/w.bin" && mv "$CHECKPOINT_DIR/.t" "$CHECKPOINT_DIR/step-$s"; '
                    'done; exit 0')
