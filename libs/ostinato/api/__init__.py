"""The public HTTP API as library code: request/response models, authentication, problem
details, and route handlers. `services/api` only composes them into a running server."""
