"""Spora's CUDA device plugin. `import spora` finds the plugin file in this directory
through the entry point "spora.plugins" (cuda = spora_plugin_cuda); nothing here
needs importing."""
