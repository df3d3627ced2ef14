import './base.css';
import './panel.css';
