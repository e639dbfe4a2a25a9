UPDATE transfers SET src_device = 1, dst_device = 0, bytes = 128, start_ms = 0.5, end_ms = 0.75;
