"""The subcommands of ``shardex``, one module each."""
