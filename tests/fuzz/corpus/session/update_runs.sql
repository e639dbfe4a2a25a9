UPDATE runs SET devices = 4, op_count = 2, metrics_json = '{"makespan":2,"ops":2,"devices":[{"device":0,"busy":1,"peakMemoryBytes":20}]}';
