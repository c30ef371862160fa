-- Exercises end with their answer in a fenced div,
--     ::: answer
--     ...
--     :::
-- which the page folds away (<details>) so that the reader predicts first,
-- then opens it. The answer's tables and numbers are the program's output,
-- run at build time like any other (filters/run.lua).
function Div(div)
  if not div.classes:includes('answer') then return nil end
  local blocks = { pandoc.RawBlock('html', '<details class="answer"><summary>Answer</summary>') }
  for _, block in ipairs(div.content) do table.insert(blocks, block) end
  table.insert(blocks, pandoc.RawBlock('html', '</details>'))
  return blocks
end
