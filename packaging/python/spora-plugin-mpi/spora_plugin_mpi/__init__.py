"""Spora's Open MPI collective plugin. `import spora` finds the plugin file in
this directory through the entry point "spora.plugins" (mpi =
spora_plugin_mpi); nothing here needs importing."""
