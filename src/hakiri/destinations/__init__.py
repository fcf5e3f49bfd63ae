"""Destinations: inspect a target, stage a DataFrame, commit one staged batch under a load spec."""
