-- 0040: a running workflow's published state and its updates' answers (issue 40 item 3) are
-- positions of its step history (`ctx.set` records `set:<name>`, an update's answer
-- `reply:<update id>`, both StepCompleted: ostinato.domain.workflow KINDS). Reading the latest
-- value of each name, or one answer, descends these small partial indexes instead of the
-- run's whole history.
CREATE INDEX run_steps_state ON run_steps (run_id, name, seq DESC)
    WHERE left(name, 4) = 'set:';
CREATE INDEX run_steps_replies ON run_steps (run_id, name)
    WHERE left(name, 6) = 'reply:';
