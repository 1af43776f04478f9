"""The five services, each its own process: `python -m services.<name>`. A service owns its
routes, ticks and checks; what several share lives in `ostinato` (libs/). Services never
import each other (import-linter contracts in pyproject.toml)."""
