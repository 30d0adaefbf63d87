import { AiSdkMessages } from './messages/ai-sdk';
import { FlowMessages } from './messages/flow';
import { KeyMessages } from './messages/keys';
import { LoopMessages } from './messages/loop';
import { McpMessages } from './messages/mcp';
import { RunMessages } from './messages/runs';
import { SetupMessages } from './messages/setup';
import { StoreMessages } from './messages/stores';

/**
 * Message factories: one place for the wording of every error of the core, each saying what to do
 * next. Written by area in `messages/`, used as one object; a name used by two areas fails the
 * architecture spec (a spread would silently keep the last).
 */
export const Messages = {
  ...RunMessages,
  ...KeyMessages,
  ...FlowMessages,
  ...StoreMessages,
  ...LoopMessages,
  ...SetupMessages,
  ...McpMessages,
  ...AiSdkMessages,
} as const;

/** The areas `Messages` is made of, for the spec that checks their names do not collide. @internal */
export const MESSAGE_AREAS = {
  RunMessages,
  KeyMessages,
  FlowMessages,
  StoreMessages,
  LoopMessages,
  SetupMessages,
  McpMessages,
  AiSdkMessages,
} as const;
