#!/usr/bin/env python3
"""Write the simulator config that simulation/run.py writes, for
  --cc hp    --bw 100 --hpai 50   (HPCC, defaults --utgt 95 --mi 0)
  --cc dcqcn --bw 100             (DCQCN)
but with absolute file paths (run.py writes mix/<topo>.txt etc. relative to
simulation/).  The template text is taken from run.py itself (its module-level
`config_template` string literal), and the values are computed exactly as run.py
computes them under Python 2 (integer division: bfsz = 16*100/50 = 32,
kmax 400*100/25 = 1600, int_multi = 100/25 = 4, DCQCN ai = 20, hai = 200).

usage: mkconfig.py RUN_PY {hp|dcqcn} TOPO_FILE FLOW_FILE TRACE_FILE OUTDIR > config.txt
"""
import re, sys

run_py, cc, topo, flow, trace, outdir = sys.argv[1:7]
# run.py is Python 2 (not parseable by python3), so take the string literal.
template = re.search(r'config_template\s*=\s*"""(.*?)"""', open(run_py).read(), re.S).group(1)

bw = 100
common = dict(bw=bw, trace='TRACE', topo='TOPO', failure='', link_down='0 0 0',
              u_tgt=95 / 100., mi=0, pint_log_base=1.01, pint_prob=1.0, enable_tr=0,
              buffer_size=16 * bw // 50,
              kmax_map="2 %d %d %d %d" % (bw * 1000000000, 400 * bw // 25, bw * 4 * 1000000000, 400 * bw * 4 // 25),
              kmin_map="2 %d %d %d %d" % (bw * 1000000000, 100 * bw // 25, bw * 4 * 1000000000, 100 * bw * 4 // 25),
              pmax_map="2 %d %.2f %d %.2f" % (bw * 1000000000, 0.2, bw * 4 * 1000000000, 0.2))
if cc == 'hp':
    ai = 50  # --hpai 50
    v = dict(cc='hp95ai50', mode=3, t_alpha=1, t_dec=4, t_inc=300, g=0.00390625, ai=ai, hai=ai,
             dctcp_ai=1000, has_win=1, vwin=1, us=1, int_multi=bw // 25, ack_prio=0)
elif cc == 'dcqcn':
    v = dict(cc='dcqcn', mode=1, t_alpha=1, t_dec=4, t_inc=300, g=0.00390625, ai=5 * bw // 25,
             hai=50 * bw // 25, dctcp_ai=1000, has_win=0, vwin=0, us=0, int_multi=1, ack_prio=1)
else:
    sys.exit('cc must be hp or dcqcn')
common.update(v)
text = template.format(**common)

# Point the file names at our files instead of simulation/mix/.
paths = {
    'TOPOLOGY_FILE': topo, 'FLOW_FILE': flow, 'TRACE_FILE': trace,
    'TRACE_OUTPUT_FILE': outdir + '/mix.tr', 'FCT_OUTPUT_FILE': outdir + '/fct.txt',
    'PFC_OUTPUT_FILE': outdir + '/pfc.txt', 'QLEN_MON_FILE': outdir + '/qlen.txt',
}
out = []
for line in text.split('\n'):
    k = line.split(' ', 1)[0]
    out.append('%s %s' % (k, paths[k]) if k in paths else line)
sys.stdout.write('\n'.join(out))
