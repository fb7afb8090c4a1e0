"""Pieces shared by the command-line tools: argument parsing and output."""
