"""One module per `newsdedup` subcommand; each exposes `register(subparsers)`."""
