"""Where kernels are built, run, checked and timed. Never imports the forge side (`bot`)."""
