import { describe } from 'vitest';
import { memoryBackend } from './backends.ts';
import { limitSuite } from './limit-suite.ts';

// No scripts in memory: the NOSCRIPT case is skipped here (and shows as skipped).
describe('memory backend', () => limitSuite(async () => memoryBackend(), false));
