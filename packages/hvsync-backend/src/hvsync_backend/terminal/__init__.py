"""``hvsync-backend sync``: run sync stages against a backend over HTTP from a terminal or cron.

`config` resolves where and how to connect, `plan` turns the command line into runs, `client` speaks the
backend's HTTP and SSE, `progress` shows it (Rich live, plain lines, or nothing for `--json`), `command`
ties them to argparse and exit codes. It talks HTTP only, so it works against any backend it can reach.
"""
