// The parts of the guided run, by name, in the order the issue tells the story.
import type { PartName } from '../cli/args.ts';
import { attacksPart } from './attacks-part.ts';
import { isolatePart } from './isolate-part.ts';
import { limitsPart } from './limits-part.ts';
import { parserPart } from './parser-part.ts';
import type { DemoPart } from './part.ts';
import { subprocessPart } from './subprocess-part.ts';

export const allParts: Readonly<Record<PartName, DemoPart>> = {
  isolate: isolatePart,
  attacks: attacksPart,
  subprocess: subprocessPart,
  parser: parserPart,
  limits: limitsPart,
};
