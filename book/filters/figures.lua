-- Figures are written relative to the chapter (![Caption.](offset-error.svg)),
-- and pandoc runs in book/: point each at its file from there, for the page
-- (which embeds it) and the EPUB alike. A figure that is not there fails the
-- build here; pandoc itself would only warn and leave a broken image.
local chapter = require 'filters.chapter'

local errors = {}

function Image(image)
  if image.src:match('^%a[%w+.-]*:') or image.src:match('^/') then return nil end
  image.src = chapter.resolve(image.src)
  local file = io.open(image.src)
  if not file then
    table.insert(errors, 'no figure ' .. image.src)
    return nil
  end
  file:close()
  return image
end

function Pandoc()
  if #errors > 0 then chapter.fail('figures', errors) end
end
