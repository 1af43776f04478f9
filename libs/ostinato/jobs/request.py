"""What a job is made of, as a client submits it (over HTTP or Kafka): `JobRequest`, whose one
home is the public API's wire models, `ostinato.wire.api` (the client sends the same
Struct the API decodes). Kept here under its old name for the job commands and their callers."""

from ostinato.wire.api import JobRequest, Name, ResourceName

__all__ = ["JobRequest", "Name", "ResourceName"]
