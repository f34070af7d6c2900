"""excite."""
