"""The text stage: files cut into chunks and the units inside them, for every source (Markdown,
sync chats, session transcripts), their token counts, and text as the keyword index reads it."""
