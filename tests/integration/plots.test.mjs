// Plots (issue 21): a python tool with "output": {"plots": true} (examples/policy.json) returns
// the figures its code draws with matplotlib as PNG outputs, shown or not; the program runs as
// it would without (its traceback, argv, __main__, exit status); nothing of the runner shows
// up in files; what the code writes itself is never taken for a figure unless it is a PNG.
// Evidence: the PNG headers (signature, IHDR size) of the returned bytes, the stored view, the
// files list, the traceback text.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setup } from './harness.mjs';

const server = setup('plots');
const hasMatplotlib = spawnSync('/usr/bin/python3', ['-c', 'import matplotlib']).status === 0;

/** Width and height from a PNG's IHDR; asserts the signature. */
function pngSize(b64) {
  const b = Buffer.from(b64, 'base64');
  assert.deepEqual([...b.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'PNG signature');
  assert.equal(b.subarray(12, 16).toString('latin1'), 'IHDR');
  return [b.readUInt32BE(16), b.readUInt32BE(20)];
}

test('figures drawn with matplotlib come back as PNG outputs, shown or not, in order', async () => {
  assert.ok(hasMatplotlib, 'python3-matplotlib is not installed (scripts/lib.sh installs it with the test packages)');
  const code = [
    'import matplotlib.pyplot as plt',
    'plt.plot([1, 2, 3], [4, 1, 9]); plt.title("first")',
    'plt.show()',
    'fig = plt.figure(figsize=(3, 2)); plt.bar(["a", "b"], [3, 5])',
    'print("drawn")',
  ].join('\n');
  const res = await server.execute({ tool: 'python', code, limits: { timeout_ms: 30000 } });
  const e = res.json;
  assert.equal(e.status, 'completed', e.stderr);
  assert.equal(e.stdout, 'drawn\n');
  assert.equal(e.outputs.length, 2, JSON.stringify(e.outputs.map((o) => o.mime)));
  assert.deepEqual(e.outputs.map((o) => [o.mime, o.withheld]), [['image/png', false], ['image/png', false]]);
  assert.deepEqual(pngSize(e.outputs[0].data), [640, 480]);
  assert.deepEqual(pngSize(e.outputs[1].data), [300, 200]); // the second figure's own size
  assert.deepEqual(e.files, [], 'the runner or its outputs leaked into files');
  const stored = (await server.request('GET', `/v1/executions/${e.id}`, { key: server.keys.agent })).json;
  assert.deepEqual(stored.outputs, e.outputs);
});

test('the program runs as it would without the runner: traceback, argv, __main__, exit status; no figures, no outputs', async () => {
  const code = [
    'import sys',
    'print(__name__, sys.argv, __file__)',
    'def f():',
    '    raise ValueError("boom")',
    'f()',
  ].join('\n');
  const e = (await server.execute({ tool: 'python', code })).json;
  assert.equal(e.status, 'failed');
  assert.equal(e.exit_code, 1);
  assert.equal(e.stdout, "__main__ ['/workspace/main.py'] /workspace/main.py\n");
  assert.match(e.stderr, /^Traceback \(most recent call last\):\n {2}File "\/workspace\/main\.py", line 5, in <module>\n/);
  assert.match(e.stderr, /line 4, in f\n[\s\S]*ValueError: boom\n$/);
  assert.ok(!e.stderr.includes('toolcage_plots'), `the runner shows in the traceback: ${e.stderr}`);
  assert.deepEqual(e.outputs, []);
  const exit = (await server.execute({ tool: 'python', code: 'import sys; sys.exit(7)' })).json;
  assert.equal(exit.exit_code, 7);
  // the program is the __main__ module: what it defines pickles (and multiprocessing finds it)
  const pk = (await server.execute({ tool: 'python', code: [
    'import pickle, sys',
    'class P:',
    '    pass',
    'print(type(pickle.loads(pickle.dumps(P()))).__name__, sys.modules["__main__"].__file__)',
  ].join('\n') })).json;
  assert.equal(pk.stdout, 'P /workspace/main.py\n', pk.stderr);
});

test('what the code writes under .toolcage is not a figure unless it is a PNG, and never a file', async () => {
  const code = [
    'import os',
    'os.makedirs("/workspace/.toolcage/outputs", exist_ok=True)',
    'open("/workspace/.toolcage/outputs/fig-001.png", "w").write("<svg onload=alert(1)>")',
    'open("/workspace/.toolcage/secret.txt", "w").write("x")',
    'open("/workspace/mine.png", "wb").write(b"\\x89PNG\\r\\n\\x1a\\n" + bytes(32))',
  ].join('\n');
  const e = (await server.execute({ tool: 'python', code, collect: ['*.png', '.toolcage/*'] })).json;
  assert.equal(e.status, 'completed', e.stderr);
  assert.deepEqual(e.outputs, [], 'a file that is not a PNG became a figure');
  assert.deepEqual(e.files.map((f) => f.path), ['mine.png'], 'only the program\'s own file is a file');
});

// A gated call's files wait under .toolcage/stage until the runner's gate opens, where python's
// start-up reads nothing (docs/sandbox.md, Warm interpreters); the runner moves them into place:
// nested folders, and a folder merged with toolcage's own .toolcage. A file where one of
// toolcage's own is, or under .toolcage/stage, is refused at the start, unrun.
test('a call\'s files are in place when its code runs, folders merged, none left staged; a clash with the runner\'s own is refused', async () => {
  const code = [
    'import os',
    'for top, dirs, files in os.walk("/workspace"):',
    '    for f in sorted(files): print(os.path.relpath(os.path.join(top, f), "/workspace"), open(os.path.join(top, f)).readline().strip())',
  ].join('\n');
  const files = [
    { path: 'data/a.txt', content: 'A' },
    { path: 'data/sub/b.txt', content: 'B' },
    { path: '.toolcage/notes.txt', content: 'N' },
    { path: 'top.txt', content: 'T' },
  ];
  const e = (await server.execute({ tool: 'python', code, files })).json;
  assert.equal(e.status, 'completed', e.stderr);
  assert.deepEqual(e.stdout.split('\n').sort(), ['', '.toolcage/notes.txt N', '.toolcage/toolcage_plots.py # toolcage: runs the tool\'s code file as __main__, as python would. With --plots, figures',
    'data/a.txt A', 'data/sub/b.txt B', 'main.py import os', 'top.txt T'], e.stdout);
  for (const path of ['.toolcage/toolcage_plots.py', '.toolcage/stage/x.py', '.toolcage/stage', '.toolcage']) {
    const r = (await server.execute({ tool: 'python', code: 'open("/workspace/ran", "w")\nprint("ran")', files: [{ path, content: 'x' }] })).json;
    assert.notEqual(r.status, 'completed', `${path}: ${JSON.stringify(r)}`);
    assert.equal(r.stdout || '', '', `${path}: it ran`);
  }
});

// A tool without -I whose PYTHONPATH reaches into the workspace, and the user's site-packages
// under HOME (/workspace): start-up looked for them before the call's files were in place, the
// runner looks again after its gate; a .pth there runs then, as the call's code, not before.
let peer;
after(async () => { if (peer) await peer.stop(); });
test('a tool without -I imports what the call ships on its PYTHONPATH and in the user\'s site-packages', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'toolcage-it-plots-path-'));
  const pol = JSON.parse(fs.readFileSync(server.policy, 'utf8'));
  pol.tools['python-path'] = { ...pol.tools.python, command: ['/usr/bin/python3', '-B', '{code_file}'],
    env: { ...pol.tools.python.env, PYTHONPATH: '/workspace/lib' } };
  const policy = path.join(dir, 'policy.json');
  fs.writeFileSync(policy, JSON.stringify(pol));
  peer = await server.peer('plots-path', { policy });
  const ver = spawnSync('/usr/bin/python3', ['-c', 'import sys; print("%d.%d" % sys.version_info[:2])']).stdout.toString().trim();
  const site = `.local/lib/python${ver}/site-packages`;
  const code = 'import helpers, vend, sys\nprint(helpers.X, vend.Y, "pth" in sys.modules)';
  const files = [
    { path: 'lib/helpers.py', content: 'X = "h"' },
    { path: `${site}/vend.py`, content: 'Y = "v"' },
    { path: `${site}/mark.pth`, content: 'import sys; sys.modules["pth"] = sys' },
  ];
  try {
    const e = (await peer.execute({ tool: 'python-path', code, files })).json;
    assert.equal(e.status, 'completed', e.stderr);
    assert.equal(e.stdout, 'h v True\n');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

// The runner freezes the start-up objects (gc.freeze, docs/plots.md): the program's own garbage
// is collected as ever, and its exit is python's: exit handlers run, and a file it never closed
// is flushed as the interpreter ends. Evidence: the freeze count the program sees, what
// gc.collect() found of its cycle, the exit handler's line, the bytes of the file collected
// after the exit.
test('start-up objects are frozen; the program\'s own cycles are collected; its exit is python\'s', async () => {
  const code = [
    'import atexit, gc',
    'print(gc.get_freeze_count() > 0)',
    'class Node:',
    '    pass',
    'a = Node(); a.me = a',
    'del a',
    'print(gc.collect() >= 1)',
    'f = open("/workspace/kept.txt", "w")',
    'f.write("written, never closed")',
    'atexit.register(print, "exit handler")',
  ].join('\n');
  const e = (await server.execute({ tool: 'python', code, collect: ['kept.txt'] })).json;
  assert.equal(e.status, 'completed', e.stderr);
  assert.equal(e.stdout, 'True\nTrue\nexit handler\n');
  assert.deepEqual(e.files.map((f) => [f.path, f.encoding, f.content]), [['kept.txt', 'utf8', 'written, never closed']]);
});
