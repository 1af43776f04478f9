"""Fair dispatch: waiting runs admitted to their pool's ready topic by `Dispatcher` rounds."""

from ostinato.dispatch.dispatcher import Dispatcher, fixed_capacity, live_workers
from ostinato.dispatch.fence import EpochFence

CONSUMER = "dispatcher"

__all__ = ["CONSUMER", "Dispatcher", "EpochFence", "fixed_capacity", "live_workers"]
