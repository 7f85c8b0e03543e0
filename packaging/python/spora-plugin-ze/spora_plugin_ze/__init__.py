"""Spora's Level Zero NPU device plugin. `import spora` finds the plugin file in this directory
through the entry point "spora.plugins" (ze = spora_plugin_ze); nothing here
needs importing."""
