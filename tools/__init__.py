"""Development tools that are not part of the product (nothing here is in the wheel or
the image): the admission benchmark (`python -m tools.bench`), the narrated demo
(`python -m tools.demo`) and the chart rendering (`python -m tools.chart`)."""
