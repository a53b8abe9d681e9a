"""Migrations of a live index's layout: the shared rate budget and the live controls."""
