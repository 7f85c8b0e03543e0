"""Spora's NCCL collective plugin. `import spora` finds the plugin file in this directory
through the entry point "spora.plugins" (nccl = spora_plugin_nccl); nothing here
needs importing."""
