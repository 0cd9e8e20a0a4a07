"""Renderers: pure functions from report models to text. They never print."""
