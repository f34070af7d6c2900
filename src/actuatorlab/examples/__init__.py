"""Worked examples built on the library (``force_bc``) and example data (``bam_xl330/``)."""
