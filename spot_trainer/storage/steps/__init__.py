"""A step's way to S3 and back: the files that go up, the store that publishes whole steps under their
manifest (`checkpoint_store`), the background uploader and its health, the publish of a step saved in
shards on several nodes (`step_parts`: its keys' grammar `part_keys`, what S3 holds of it `part_listing` and
`part_records`, the settle/publish protocol `step_publish`), the restore, and the job's S3 as the runtime
holds it (`remote`).

It may import every other wing of storage and, of `spot_trainer.integrations`, only `checkpoint_names` (the name of
the record a restore in part leaves for the ranks' reads).
"""
