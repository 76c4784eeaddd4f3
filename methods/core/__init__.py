"""Shared library of the harness. Modules are imported explicitly (`from methods.core import
train`), so a step that needs no torch (plots, claims, report) never imports it."""
