// Real programs under the default seccomp allowlist on the real kernel: each runs a small job
// that exercises its usual calls (threads, files, pipes, child processes) and its exact output
// is checked. The Node, Python, sh, perl and Go (esbuild) start-ups are in escapes.test.ts.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createSandbox, SandboxControl } from '../src/index.ts';
import { node, python, tempDir } from './support/helpers.ts';

const git = [
  '-c',
  'user.name=coda',
  '-c',
  'user.email=coda@example.invalid',
  '-c',
  'init.defaultBranch=main',
];

describe('real programs under the default seccomp allowlist', () => {
  it('git init, add and commit in the writable directory', async () => {
    const dir = tempDir('/var/tmp');
    const sandbox = createSandbox({ allowFileWrites: true, restrictToDirectory: dir });
    const script = [
      `git ${git.join(' ')} init -q .`,
      'echo hello > a.txt',
      `git ${git.join(' ')} add a.txt`,
      `git ${git.join(' ')} commit -q -m first`,
      'git log --format=%s',
      'git ls-files',
    ].join(' && ');
    const result = await sandbox.run('/bin/bash', ['-c', script]);
    expect(result.stderr).toBe('');
    expect(result.stdout).toBe('first\na.txt\n');
    expect(result.controls).toContain(SandboxControl.seccomp);
    expect(readFileSync(join(dir, '.git/HEAD'), 'utf8')).toBe('ref: refs/heads/main\n');
  });

  it('tar and gzip round-trip a directory through a pipe', async () => {
    const dir = tempDir('/var/tmp');
    const sandbox = createSandbox({ allowFileWrites: true, restrictToDirectory: dir });
    const script = [
      'mkdir -p src/sub && echo one > src/a && echo two > src/sub/b',
      'tar -cf - src | gzip -9 > out.tgz',
      'mkdir back && gzip -dc out.tgz | tar -xf - -C back',
      'cat back/src/a back/src/sub/b',
      'gzip -t out.tgz && echo gzip-ok',
    ].join(' && ');
    const result = await sandbox.run('/bin/bash', ['-c', script]);
    expect(result.stderr).toBe('');
    expect(result.stdout).toBe('one\ntwo\ngzip-ok\n');
  });

  it('curl --version', async () => {
    const result = await createSandbox().run('/usr/bin/curl', ['--version']);
    expect(result.stderr).toBe('');
    expect(result.stdout).toMatch(/^curl \d+\.\d+\.\d+ /);
    expect(result.exitCode).toBe(0);
  });

  it('bash with job control off, pipes, subshells and a here-document', async () => {
    const script =
      'for i in 1 2 3; do (echo $i) & done; wait; cat <<EOF | sort -r | tr -d "\\n"\na\nb\nEOF\n';
    const result = await createSandbox().run('/bin/bash', ['-c', script]);
    expect(result.stderr).toBe('');
    expect(result.stdout.split('\n').slice(0, 3).sort()).toEqual(['1', '2', '3']);
    expect(result.stdout.endsWith('ba')).toBe(true);
  });

  it('node with worker threads, a child process and the file system', async () => {
    const code = [
      "const { Worker } = require('node:worker_threads');",
      "const { execFileSync } = require('node:child_process');",
      "const fs = require('node:fs');",
      "fs.writeFileSync('/tmp/x', 'file');",
      'const w = new Worker(\'require("node:worker_threads").parentPort.postMessage(6 * 7)\', { eval: true });',
      "w.on('message', (m) => { console.log(m, fs.readFileSync('/tmp/x', 'utf8'), execFileSync('/bin/echo', ['child']).toString().trim()); w.terminate(); });",
    ].join('\n');
    const result = await createSandbox().run(node, ['-e', code]);
    expect(result.stderr).toBe('');
    expect(result.stdout).toBe('42 file child\n');
  });

  it('python3 with threads, multiprocessing and subprocess', async () => {
    const code = [
      'import multiprocessing, subprocess, threading',
      'out = []',
      't = threading.Thread(target=lambda: out.append("thread")); t.start(); t.join()',
      'with multiprocessing.get_context("fork").Pool(2) as pool: squares = pool.map(abs, [-1, -2])',
      'print(out[0], squares, subprocess.run(["/bin/echo", "child"], capture_output=True, text=True).stdout.strip())',
    ].join('\n');
    const result = await createSandbox().run(python, ['-c', code]);
    expect(result.stderr).toBe('');
    expect(result.stdout).toBe('thread [1, 2] child\n');
  });
});
