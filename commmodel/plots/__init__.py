"""Figures from the model's tidy records (matplotlib, imported lazily inside each function)."""
