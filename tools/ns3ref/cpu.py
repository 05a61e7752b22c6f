#!/usr/bin/env python3
"""cpu.py N CMD [ARGS...]: run CMD N times and print each run's CPU time (user + system,
from the kernel's rusage, at 0.1 ms resolution where /usr/bin/time has 10 ms), wall time
and the peak RSS so far of the children."""
import resource, subprocess, sys, time
n=int(sys.argv[1]); cmd=sys.argv[2:]
for i in range(n):
    r0=resource.getrusage(resource.RUSAGE_CHILDREN); t=time.time()
    subprocess.run(cmd, stdout=subprocess.DEVNULL)
    r1=resource.getrusage(resource.RUSAGE_CHILDREN)
    print("%.1f ms cpu  %.1f ms wall  maxrss %d KB" % (1000*(r1.ru_utime+r1.ru_stime-r0.ru_utime-r0.ru_stime), 1000*(time.time()-t), r1.ru_maxrss))
