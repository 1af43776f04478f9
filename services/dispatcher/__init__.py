"""dispatcher: fair dispatch. Waiting runs are admitted to their pool's ready topic by
`Dispatcher` rounds (`dispatcher`) over a snapshot of the inputs (`snapshot`); `fence` drops
stale wake-ups."""
