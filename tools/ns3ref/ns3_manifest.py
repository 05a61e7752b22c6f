#!/usr/bin/env python3
"""Read the module list that waf would build out of each ns-3 module's wscript,
without running waf.

Each src/<module>/wscript has a build(bld) function that declares
  * the module library and its dependencies:  bld.create_ns3_module(name, deps)
    followed by  module.source = [...]  (sometimes .extend()ed conditionally)
  * the public headers:  bld(features='ns3header'); headers.source = [...]
We execute build() against a tiny fake `bld` that records those lists, with
the configure-time environment a default `waf configure` on Linux/gcc 12 would
produce (see ENV below).  Output: one line per item, tab separated:
  module <name> <dep> <dep> ...
  src    <name> <path relative to simulation/>
  hdr    <name> <path relative to simulation/>
for the dependency closure of the modules named on the command line.
"""
import sys, os, types

# Configure-time results of `waf configure` on Debian 12 / gcc 12 / x86-64
# (no MPI, no NSC, no sqlite3, no GTK2/libxml2, no GSL, no examples/tests,
# no python bindings).  INT64X64_USE_128: gcc has __uint128_t.
ENV = {
    'INT64X64_USE_128': 1,
    'ENABLE_THREADING': True,   # pthread.h present
    'ENABLE_REAL_TIME': True,   # librt present
}

class Anything:
    """Swallows any attribute access / call (for waf APIs we don't care about)."""
    def __init__(self, *a, **k): pass
    def __getattr__(self, name): return Anything()
    def __call__(self, *a, **k): return Anything()
    def __bool__(self): return False
    def __iter__(self): return iter(())

class Env(dict):
    def __getitem__(self, k): return self.get(k, [] if k.isupper() and k.startswith(('DEFINES', 'LIBPATH')) else False)
    def __getattr__(self, k): return self[k]
    def append_value(self, *a): pass

class Module:
    def __init__(self, name, deps):
        self.name, self.deps = name, list(deps)
        self.source, self.use, self.includes = [], [], []
        self.env = Env(ENV)
    def __getattr__(self, k): return Anything()

class HeaderGen:
    def __init__(self):
        self.module, self.source = None, []
    def __getattr__(self, k): return Anything()

class Bld:
    def __init__(self):
        self.env = Env(ENV)
        self.modules, self.headers = [], []
    def create_ns3_module(self, name, deps=()):
        m = Module(name, deps); self.modules.append(m); return m
    def __call__(self, *a, **k):
        if 'ns3header' in str(k.get('features', '')):
            h = HeaderGen(); self.headers.append(h); return h
        return Anything()
    def ns3_python_bindings(self, *a, **k): return None
    def recurse(self, *a, **k): pass
    def __getattr__(self, k): return Anything()

def fake_waf_modules():
    opts = types.SimpleNamespace(int64x64_as_double=False, enable_mpi=False,
                                 with_nsc=None, disable_gtk=True)
    waflib = types.ModuleType('waflib')
    for sub in ('Options', 'Errors', 'Logs', 'Utils', 'Task', 'TaskGen', 'Build', 'Configure'):
        m = types.ModuleType('waflib.' + sub)
        m.__getattr__ = lambda name: Anything()
        setattr(waflib, sub, m); sys.modules['waflib.' + sub] = m
    waflib.Options.options = opts
    waflib.Options.platform = 'linux'
    waflib.Errors.WafError = Exception
    sys.modules['waflib'] = waflib
    w = types.ModuleType('wutils'); w.APPNAME = 'ns'; w.VERSION = '3.17'
    sys.modules['wutils'] = w

def load(simdir, name):
    path = os.path.join(simdir, 'src', name, 'wscript')
    # wscripts are Python 2 and mix tabs/spaces; Python 2 expands tabs to
    # multiples of 8 columns, which is exactly str.expandtabs(8).
    code = open(path).read().expandtabs(8)
    g = {'__file__': path, '__name__': 'wscript_' + name}
    exec(compile(code, path, 'exec'), g)
    bld = Bld()
    g['build'](bld)
    mods = [m for m in bld.modules if m.name == name]
    assert len(mods) == 1, (name, [m.name for m in bld.modules])
    m = mods[0]
    hdrs = [s for h in bld.headers if h.module == name for s in h.source]
    srcs = [s for s in m.source if s.endswith('.cc')]
    return m.deps, srcs, hdrs

def main():
    fake_waf_modules()
    simdir = sys.argv[1]
    todo, seen, order = list(sys.argv[2:]), {}, []
    while todo:
        n = todo.pop()
        if n in seen: continue
        seen[n] = load(simdir, n)
        todo.extend(seen[n][0])
    for n in sorted(seen):
        deps, srcs, hdrs = seen[n]
        print('\t'.join(['module', n] + deps))
        for s in srcs: print('src\t%s\tsrc/%s/%s' % (n, n, s))
        for h in hdrs: print('hdr\t%s\tsrc/%s/%s' % (n, n, h))

main()
