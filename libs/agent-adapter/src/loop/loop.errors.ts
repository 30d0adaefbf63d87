// The tool loop's errors are core errors (the root entry exports them): they live in errors/.
// Kept until loop/tool-loop.ts imports them from '../errors'; then delete this file.
export { ChatModelError, MaxStepsExceeded } from '../errors';
