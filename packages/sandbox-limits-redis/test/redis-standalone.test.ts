import { describe } from 'vitest';
import { ioredisBackend } from './backends.ts';
import { limitSuite } from './limit-suite.ts';

describe('redis-standalone backend', () => limitSuite(async () => ioredisBackend()));
// The host's clock instead of Redis TIME: the same behaviour, timed by this process.
describe('redis-standalone backend, clock host', () =>
  limitSuite(async () => ioredisBackend(undefined, 'host')));
