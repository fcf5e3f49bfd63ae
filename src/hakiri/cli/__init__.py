"""The command line: Typer sub-apps per noun. Parse, call one service, render; no logic here."""
