import type { UIMessage } from 'ai';

/** A chat-completions user message's content (SPEC §11): a string, or text and image parts. */
export type UserContent = string | ({ type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string } })[];

/**
 * The last user message of a chat as the input of an arcflow run: its text parts, and its image
 * files as `image_url` parts. A message with only text becomes a string. Other parts (reasoning,
 * tools, data) are the UI's own and are left out; a file that is not an image is refused, since
 * chat-completions content has no place for it.
 */
export function userContent(message: UIMessage): UserContent {
  const parts: Exclude<UserContent, string> = [];
  for (const part of message.parts) {
    if (part.type === 'text') parts.push({ type: 'text', text: part.text });
    else if (part.type === 'file') {
      if (!/^image(\/|$)/.test(part.mediaType)) {
        throw new Error(`ArcflowChatTransport: a message may carry images, not '${part.mediaType}' files (chat-completions content has text and image_url parts)`);
      }
      parts.push({ type: 'image_url', image_url: { url: part.url } });
    }
  }
  if (parts.length === 0) throw new Error('ArcflowChatTransport: the last user message has no text or image to send');
  return parts.every((part) => part.type === 'text') ? parts.map((part) => (part as { text: string }).text).join('\n') : parts;
}
