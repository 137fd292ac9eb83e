// What each runnable README block prints, so an example that runs but no longer does what its
// comments say fails (a parser result that became CRASH still exits 0). One entry per runnable
// block, in README order; each pattern must match somewhere in the block's stdout.

/** README → its runnable blocks' expected output. The root README is `README.md`. */
export const expectedOutput: Record<string, readonly (readonly RegExp[])[]> = {
  '@coda/sandbox-core': [
    [/^64 30000$/m, /path: 'memoryMb'/, /received: 'NaN'/],
    [/^RATE_LIMITED$/m],
  ],
  '@coda/sandbox-isolate': [
    [
      /type: 'status'[\s\S]*message: 'pricing'/,
      /type: 'result',\s+payload: 1\.5/,
      /^result undefined$/m,
    ],
    [
      /declare const tools: \{[\s\S]*inStock\(input: \{\s*fruit: "apple" \| "pear";\s*\}\)/,
      /apples: 12/,
      /kiwis: 'Invalid tools\.inStock input: fruit: /,
    ],
    [
      /^42$/m,
      /Cannot read properties of undefined \(reading 'toFixed'\)/,
      /location: \{ line: 2, column: 16 \}/,
    ],
  ],
  '@coda/sandbox-limits-redis': [[/^admitted [0-9a-f-]{36}$/m]],
  '@coda/sandbox-parser-host': [
    [
      /^frames \[ \{ id: 'a', t: 0, v: 1\.5 \}, \{ id: 'a', t: 1, v: 2 \} \]$/m,
      /^false RUNTIME t must be a number$/m,
    ],
  ],
  '@coda/sandbox-subprocess': [
    [
      /^true 2 notes\.txt\n 0 false true$/m,
      /^bubblewrap$/m,
      /'bubblewrap',[\s\S]*'namespace:net',[\s\S]*'seccomp',/,
      /^\$\(id\) ; ls$/m,
      /^false 1 RUNTIME$/m,
    ],
  ],
  'README.md': [],
};
