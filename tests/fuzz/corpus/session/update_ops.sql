UPDATE run_ops SET device = 1, stage = 3, microbatch = 2 WHERE seq = 0;
