"""Spora's ROCm (HIP) device plugin. `import spora` finds the plugin file in this directory
through the entry point "spora.plugins" (rocm = spora_plugin_rocm); nothing here
needs importing."""
