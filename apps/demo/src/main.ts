// `pnpm demo`: the guided run lands with the demo issue; until then this shows the defaults
// every layer starts from.
import {
  defaultExecutionLimits,
  defaultParserLimits,
  defaultSandboxPolicy,
} from '@coda/sandbox-core';

console.log('Coda Sandbox demo — placeholder until the layers land.\n');
console.log('Isolate execution limits:', defaultExecutionLimits);
console.log('Subprocess sandbox policy:', defaultSandboxPolicy);
console.log('Parser limits:', defaultParserLimits);
