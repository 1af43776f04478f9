-- 0031: completion deadlines, job owners and alerts that reach people (issue #21).
--
-- Jobs: `complete_within_seconds` (a run must have succeeded this long after its slot),
-- `max_staleness_seconds` (a recurring job's last success may not get older than this), and
-- `owner` (a team name: alerts about the job go to that team's sinks), and the latest slot of a
-- finding the alert rules watch: `last_missing_slot` (LedgerSlotMissing) and `last_overdue_slot`
-- (CompletionOverdue of a run); an alert fires while no run of a later (or the same) slot has
-- succeeded. Runs: `completion_overdue`, set by the projector of `CompletionOverdue`, so the
-- deadline check looks at each breached run once.
ALTER TABLE jobs
    ADD COLUMN complete_within_seconds float8,
    ADD COLUMN max_staleness_seconds   float8,
    ADD COLUMN owner                   text,
    ADD COLUMN last_missing_slot       timestamptz,
    ADD COLUMN last_overdue_slot       timestamptz;
CREATE INDEX jobs_findings ON jobs (id)
    WHERE last_missing_slot IS NOT NULL OR last_overdue_slot IS NOT NULL;
ALTER TABLE runs ADD COLUMN completion_overdue boolean NOT NULL DEFAULT false;
-- The alert rules' other inputs, read every evaluation: runs marked stuck once, letters new.
CREATE INDEX runs_stuck_marked ON runs (tenant_id) WHERE stuck_version IS NOT NULL;
CREATE INDEX dead_letters_untriaged ON dead_letters (tenant_id) WHERE triage_state = 'new';
CREATE INDEX jobs_deadlines ON jobs (id)
    WHERE complete_within_seconds IS NOT NULL OR max_staleness_seconds IS NOT NULL;

-- Sinks: where a tenant's alerts are delivered (PUT /v1/alert-sinks/{name}). `owners`: the
-- teams it receives alerts for; `is_default`: it also receives the alerts no owner's sink
-- takes (a job without owner, or an owner without a sink). Configuration, not history.
CREATE TABLE alert_sinks (
    tenant_id     uuid        NOT NULL,
    name          text        NOT NULL,
    url           text        NOT NULL,
    secret_header text,          -- a header name sent with every delivery, e.g. Authorization
    secret_value  text,          -- its value (never shown back by the API)
    owners        text[]      NOT NULL DEFAULT '{}',
    is_default    boolean     NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, name)
);

-- Alert state: one row per alert key (rule + labels), firing or resolved. A firing alert that
-- fires again keeps its row (dedup); a resolved one that fires again starts a new episode
-- (`starts_at` moves).
CREATE TABLE alert_states (
    tenant_id   uuid        NOT NULL,
    alert_key   text        NOT NULL,
    rule        text        NOT NULL,
    group_key   text        NOT NULL,
    owner       text,
    labels      json        NOT NULL,
    annotations json        NOT NULL,
    status      text        NOT NULL CHECK (status IN ('firing', 'resolved')),
    starts_at   timestamptz NOT NULL,
    ends_at     timestamptz,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, alert_key)
);
CREATE INDEX alert_states_firing ON alert_states (tenant_id, rule) WHERE status = 'firing';
-- An episode is resolved, never deleted (the services' role may not).
REVOKE DELETE ON alert_states FROM ostinato_app;

-- The delivery outbox: one row per (sink, alert episode, status), written in the evaluation's
-- transaction, marked `delivered_at` once the sink answered 2xx. A sink that is down keeps its rows; they are
-- retried with backoff (`next_attempt_at`). The unique key makes each firing and each
-- resolution one delivery per sink, whatever the number of evaluations.
CREATE TABLE alert_deliveries (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id       uuid        NOT NULL,
    sink_name       text        NOT NULL,
    alert_key       text        NOT NULL,
    group_key       text        NOT NULL,
    status          text        NOT NULL CHECK (status IN ('firing', 'resolved')),
    starts_at       timestamptz NOT NULL,
    alert           json        NOT NULL,  -- the Alertmanager alert object
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL,
    last_error      text,
    delivered_at    timestamptz,
    created_at      timestamptz NOT NULL,
    UNIQUE (tenant_id, sink_name, alert_key, starts_at, status)
);
CREATE INDEX alert_deliveries_due ON alert_deliveries (next_attempt_at, id)
    WHERE delivered_at IS NULL;

-- Usage accounting (GET /v1/usage) reads a tenant's events by time: a BRIN index costs the
-- append path almost nothing (the log is written in time order) and narrows the scan to the
-- block ranges of the window.
CREATE INDEX events_occurred_brin ON events USING brin (occurred_at);
