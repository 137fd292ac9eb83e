import { describe } from 'vitest';
import { ioredisBackend } from './backends.ts';
import { limitSuite } from './limit-suite.ts';

describe('redis-standalone backend', () => limitSuite(async () => ioredisBackend()));
