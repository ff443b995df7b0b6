"""A posted job as its submitter sees it: chain reads (`view`), the event history they no longer show (`history`),
why a task waits and what to do (`advice`), tables (`table`), loss curves (`plot`) and the verification pot (`pot`)."""
