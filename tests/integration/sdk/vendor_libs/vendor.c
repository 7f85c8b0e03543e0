/* Stands in for a vendor runtime (libcudart, libamdhip64, a driver stub). */
int vendor_device_count(void) { return 0; }
