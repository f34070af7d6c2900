"""Example data (``bam_xl330/``: 11 real XL330 logs, the data of the README's quick start)."""
